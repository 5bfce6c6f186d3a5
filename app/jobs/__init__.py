"""Jobs: long computations run by workers, with their progress and answers."""
