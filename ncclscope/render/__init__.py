"""Renderers: turn a Case (and later its findings) into text for people and machines."""
