"""The plan: a call's problem, the strategy table, block sizes in force, the workspace and the
compiled entry points with their named roles."""
