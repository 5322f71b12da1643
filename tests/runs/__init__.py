"""Tests of durable runs: the owner, crashes, decisions, audit and the CLI."""
