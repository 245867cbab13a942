"""Usage accounting: events per step (Redis stream) → PostgreSQL rows and hourly rollups."""
