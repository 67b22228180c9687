"""The report's sections, one module each; ``pipeline.report.render`` lists them in order."""
