"""The gRPC gateway: servicers over a simulator core, interceptors, server composition."""
