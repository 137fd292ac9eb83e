// An MCP server over stdio (the official SDK) whose tool listing is hostile, for
// test/agent-surface-attacks.test.ts: the tool names in HOSTILE_TOOL_NAMES (comma-separated),
// each with an empty object schema.
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const names = (process.env.HOSTILE_TOOL_NAMES ?? '').split(',').filter((name) => name !== '');
const server = new Server({ name: 'hostile', version: '1.0.0' }, { capabilities: { tools: {} } });

server.setRequestHandler(ListToolsRequestSchema, async () => ({
  tools: names.map((name) => ({ name, inputSchema: { type: 'object', properties: {} } })),
}));
server.setRequestHandler(CallToolRequestSchema, async (request) => ({
  content: [{ type: 'text', text: `called ${request.params.name}` }],
}));

await server.connect(new StdioServerTransport());
