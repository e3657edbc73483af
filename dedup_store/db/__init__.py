"""The database layer: schema, engine, SQL and COPY."""
