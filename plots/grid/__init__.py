"""report.md's ranking of the entries a backend entry's `grid` made (results.csv `grid_options`)."""
