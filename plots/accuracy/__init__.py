"""Task accuracy against throughput: report.md's table and the chart (docs/measurement.md, "Accuracy")."""
