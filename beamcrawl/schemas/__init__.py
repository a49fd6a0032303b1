"""Record types that travel between stages and their Arrow schemas."""
