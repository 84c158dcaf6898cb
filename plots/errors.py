"""The one exception the plots package raises for input a user can fix."""


class PlotError(Exception):
    """Bad input (missing folder, unknown column, nothing plottable); str() is a one-line message for the user."""
