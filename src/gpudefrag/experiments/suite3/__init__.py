"""Suite 3: failures, priorities, spares and elastic nodes: settings and variants, the suite driver, its report and summary."""
