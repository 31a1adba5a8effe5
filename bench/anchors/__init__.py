"""What every contender shares: the offline environment, the scenarios, the tool and the probe."""
