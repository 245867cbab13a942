"""Which model version a session gets, and where its steps go (the operator's registry)."""
