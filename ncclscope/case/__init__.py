"""Building the Case from parsed records: assembly, typed facts, topology, device trees, links, hang progress."""
