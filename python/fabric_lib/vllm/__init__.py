"""fabric_lib.vllm: vLLM integration. The KV connector is fabric_lib.vllm.connector.FabricConnector
(load it with kv_connector_module_path="fabric_lib.vllm.connector"; docs/kv.md#vllm)."""
