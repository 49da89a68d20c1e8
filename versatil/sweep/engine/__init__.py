"""The sweep driver: Tune objects, the param space, the run loop, its console and tracking."""
