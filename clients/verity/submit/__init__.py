"""Posting a job: its options and their checks (`options`), the data it trains on (`data`), module-parallel and
network options (`modules`, `network`), building, uploading and posting it (`prepare`), what it costs and whether it
fits the network (`fit`), and following it once posted (`wait`). Light on import: `verity --help` reads `options`."""
