"""Helpers every layer may use: exit statuses, output files, sizes and ranges in words, NCCL versions."""
