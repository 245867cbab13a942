"""Tenants, API keys and quota settings: who is calling and what they may do."""
