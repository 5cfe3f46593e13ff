"""Training the agents' model on what a town produced (``agora train``), and the loop that runs a
town, rewards it, trains, and runs again (``agora evolve``): docs/rewards.md, "The loop"."""
