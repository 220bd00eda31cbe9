"""Generated gRPC stubs of the trainer seam (api/trainer/v1/trainer.proto).

Do not edit: regenerate with api/generate.sh (grpcio-tools pinned there).
"""
