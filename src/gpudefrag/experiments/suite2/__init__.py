"""Suite 2: gangs on a topology: settings and variants, the suite driver, its report and summary."""
