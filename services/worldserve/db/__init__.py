"""PostgreSQL: SQLAlchemy tables, Alembic migrations, and the queries built on them."""
