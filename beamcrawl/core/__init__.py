"""Web logic with no Beam import, by subject: URLs, the network, policy, content, the archive, the runtime."""
