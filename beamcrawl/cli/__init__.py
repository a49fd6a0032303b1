"""The beamcrawl command: one module per subcommand, their shared argument parsing, and the quick tools."""
