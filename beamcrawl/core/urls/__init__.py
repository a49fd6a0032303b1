"""URLs: normalisation and fingerprints, host keys and registered domains, URL-shape rules, seed lines."""
