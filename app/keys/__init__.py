"""API keys: minting, listing and revoking them, and the generated admin key."""
