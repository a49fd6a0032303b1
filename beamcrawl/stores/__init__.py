"""The Bigtable-shaped store interface, its embedded (SQLite) and Cloud Bigtable backends, and the emulator for tests."""
