"""The ground floor: what every stage uses and that uses no stage.

`io` (atomic writes, JSONL, journals), `hashing` (stable hashes, file fingerprints, slugs for cache names),
`errors` (the one-line error types), `retry` (the one retry policy of remote clients), `secrets` (masking) and
`overrides` (folder-valued command-line overrides quoted for Hydra).
Nothing here imports from `rag.*` above it, so every arrow in the package points down to this folder.
"""
