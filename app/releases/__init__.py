"""Central-model releases: differentially private results against a privacy budget."""
