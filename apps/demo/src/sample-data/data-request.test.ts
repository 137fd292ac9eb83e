import { isSandboxError, type SandboxValidationError } from '@coda/sandbox-core';
import { describe, expect, it } from 'vitest';
import { answerDataRequest } from './data-request.ts';
import { sampleOrders } from './orders.ts';

describe('answerDataRequest', () => {
  it('filters and pages orders', () => {
    const open = sampleOrders.filter((order) => order.status === 'open' && order.region === 'EMEA');
    const first = answerDataRequest({
      resource: 'orders',
      where: { region: 'EMEA', status: 'open' },
      pageSize: 5,
    });
    expect(first).toMatchObject({ page: 1, total: open.length, pages: Math.ceil(open.length / 5) });
    expect(first.items).toEqual(open.slice(0, 5).map((order) => ({ ...order })));
  });

  it('lists the customers', () => {
    const { items, total } = answerDataRequest({ resource: 'customers' });
    expect(total).toBe(8);
    expect(items).toContain('acme');
  });

  it('refuses bad params naming each field, hostile keys included', () => {
    const params = JSON.parse(
      '{"resource":"orders","where":{"__proto__":{"region":"x"},"status":"lost"},"pageSize":1000}',
    );
    let caught: unknown;
    try {
      answerDataRequest(params);
    } catch (error) {
      caught = error;
    }
    expect(isSandboxError(caught) && caught.code).toBe('VALIDATION');
    const paths = (caught as SandboxValidationError).issues.map((issue) => issue.path).sort();
    expect(paths).toEqual(['pageSize', 'where.__proto__', 'where.status']);
    expect(({} as { region?: string }).region).toBeUndefined();
  });
});
