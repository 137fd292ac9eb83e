// A tiny MCP server over stdio, made with the official SDK, for test/mcp.test.ts: a weather tool
// with a JSON Schema input, a tool that reports an error, one with structured output, and a
// counter of the calls that reached the server.
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';

let calls = 0;
const server = new Server(
  { name: 'test-weather', version: '1.0.0' },
  { capabilities: { tools: {} } },
);

server.setRequestHandler(ListToolsRequestSchema, async () => ({
  tools: [
    {
      name: 'get-forecast',
      description: 'Daily forecast for a city.',
      inputSchema: {
        type: 'object',
        properties: {
          city: { type: 'string', description: 'City name', minLength: 1 },
          days: { type: 'integer', minimum: 1, maximum: 7 },
          units: { type: 'string', enum: ['c', 'f'], default: 'c' },
        },
        required: ['city'],
        additionalProperties: false,
      },
    },
    {
      name: 'station.status',
      description: 'Status of the weather station.',
      inputSchema: { type: 'object', properties: {} },
      outputSchema: {
        type: 'object',
        properties: { online: { type: 'boolean' }, args: { type: 'object' } },
        required: ['online'],
      },
    },
    { name: 'broken', inputSchema: { type: 'object', properties: {} } },
    { name: 'calls', inputSchema: { type: 'object', properties: {} } },
  ],
}));

server.setRequestHandler(CallToolRequestSchema, async (request) => {
  calls++;
  const args = (request.params.arguments ?? {}) as Record<string, unknown>;
  switch (request.params.name) {
    case 'get-forecast':
      return {
        content: [
          {
            type: 'text',
            text: `${String(args.city)}: ${String(args.days ?? 1)} days in ${String(args.units)}`,
          },
        ],
      };
    case 'station.status':
      return { content: [{ type: 'text', text: 'ok' }], structuredContent: { online: true, args } };
    case 'broken':
      return {
        content: [{ type: 'text', text: 'sensor offline at /srv/weather/sensors/7' }],
        isError: true,
      };
    case 'calls':
      return { content: [{ type: 'text', text: String(calls) }] };
    default:
      throw new Error(`unknown tool ${request.params.name}`);
  }
});

await server.connect(new StdioServerTransport());
