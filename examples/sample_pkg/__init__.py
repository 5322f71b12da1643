"""A small package the review example type-checks and tests."""
