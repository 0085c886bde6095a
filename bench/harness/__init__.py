"""The benchmark harness of shiftboss: `bench/run` drives these modules."""
