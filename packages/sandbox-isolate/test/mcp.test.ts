// toolsFromMcpClient against a real MCP server (the SDK's own, over stdio, started here): the
// server's tools become `tools.NAME` in user code, their JSON Schema input is checked on the host
// and rendered by engine.toolDeclarations().
import { fileURLToPath } from 'node:url';
import { SandboxValidationError } from '@coda/sandbox-core';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SandboxEngine } from '../src/index.ts';
import { toolsFromMcpClient } from '../src/mcp/index.ts';
import { expectResult } from './helpers.ts';

const serverPath = fileURLToPath(new URL('./support/mcp-server.ts', import.meta.url));
const client = new Client({ name: 'sandbox-isolate-test', version: '1.0.0' });
let engine: SandboxEngine;

beforeAll(async () => {
  await client.connect(new StdioClientTransport({ command: process.execPath, args: [serverPath] }));
  engine = new SandboxEngine({ isolation: 'in-process', tools: await toolsFromMcpClient(client) });
});
afterAll(async () => {
  await engine?.dispose();
  await client.close();
});

const payloadOf = async (code: string) => expectResult(await engine.run({ code })).payload;

describe('toolsFromMcpClient', () => {
  it('calls the server’s tools by identifier names, with text and structured results', async () => {
    expect(
      await payloadOf(`return [
        await tools.get_forecast({ city: 'Oslo', days: 3 }),
        await tools.station_status(),
      ]`),
    ).toEqual(['Oslo: 3 days in c', { online: true, args: {} }]);
  });

  it('validates input against the tool’s JSON Schema on the host, before the server', async () => {
    const before = await payloadOf('return await tools.calls()');
    expect(
      await payloadOf(`try { await tools.get_forecast({ city: '', days: 9, wind: true }); }
        catch (error) { return error.message; }`),
    ).toBe(
      'Invalid tools.get_forecast input: city: Too small: expected string to have >=1 characters (got ""); days: Too big: expected number to be <=7 (got 9); wind: unknown option (got true)',
    );
    expect(await payloadOf('return await tools.calls()')).toBe(String(Number(before) + 1));
  });

  it('rejects in user code with the text of an isError result, host paths masked', async () => {
    expect(
      await payloadOf(`try { await tools.broken(); } catch (error) { return error.message; }`),
    ).toBe('sensor offline at <host>');
  });

  it('renders the server’s schemas (outputSchema as the return type) and descriptions in engine.toolDeclarations()', () => {
    expect(engine.toolDeclarations()).toBe(
      [
        'declare const tools: {',
        '  /** Daily forecast for a city. */',
        '  get_forecast(input: {',
        '    /** City name */',
        '    city: string;',
        '    days?: number;',
        '    /** @default "c" */',
        '    units?: "c" | "f";',
        '  }): Promise<unknown>;',
        '  /** Status of the weather station. */',
        '  station_status(input?: Record<string, unknown>): Promise<{',
        '    online: boolean;',
        '    args?: Record<string, unknown>;',
        '    [key: string]: unknown;',
        '  }>;',
        '  broken(input?: Record<string, unknown>): Promise<unknown>;',
        '  calls(input?: Record<string, unknown>): Promise<unknown>;',
        '};',
      ].join('\n'),
    );
  });

  it('puts a prefix before every name and refuses a bad one', async () => {
    expect(Object.keys(await toolsFromMcpClient(client, { prefix: 'wx_' }))).toEqual([
      'wx_get_forecast',
      'wx_station_status',
      'wx_broken',
      'wx_calls',
    ]);
    const refused = await toolsFromMcpClient(client, { prefix: '1x' }).catch((error) => error);
    expect(refused).toBeInstanceOf(SandboxValidationError);
    expect((refused as SandboxValidationError).message).toBe(
      'Invalid toolsFromMcpClient options: prefix: expected a JavaScript identifier (got "1x")',
    );
  });
});
