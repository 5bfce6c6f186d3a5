"""Federated rounds: sites aggregate their rankings under secure aggregation."""
