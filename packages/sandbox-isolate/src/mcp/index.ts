export {
  type McpToolClient,
  type McpToolListing,
  type McpToolResult,
  type McpToolsOptions,
  toolsFromMcpClient,
} from './tools-from-mcp-client.ts';
