"""A store's schema: its tables and indexes, their migrations, its SQL names, how keys are kept."""
