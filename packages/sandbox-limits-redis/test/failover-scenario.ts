// What the failover tests share: three "hosts" (each its own client, store and guards, every guard
// with failMode insurance: the worst case for the bound) run rate limits, turn budgets and
// concurrency leases for a few entities while the test disrupts Redis, and the tally of what each
// host was admitted, checked against the bounds docs/limits.md states. The bounds are written here
// from the documented formulas and the rule's figures, never read from the code under test.
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { isSandboxError } from '@coda/sandbox-core';
import { expect } from 'vitest';
import {
  type ConcurrencyGuard,
  createConcurrencyGuard,
  createRateLimitGuard,
  createTurnBudgetGuard,
  type LimitStore,
  type RateLimitGuard,
  type TurnBudgetGuard,
} from '../src/index.ts';

/** The limits every host applies. */
export const limits = {
  rate: { limit: 4, windowMs: 60_000, burst: 4 },
  maxExecutionsPerTurn: 3,
  maxPerUser: 2,
  timeoutMs: 300,
  /** How long each admitted execution holds its lease. */
  holdMs: 400,
} as const;

/** A user with one conversation turn. */
export interface Entity {
  userId: string;
  conversationId: string;
  turnId: string;
}

interface Host {
  rate: RateLimitGuard;
  budget: TurnBudgetGuard;
  conc: ConcurrencyGuard;
  probe: RateLimitGuard;
}

function hostOn(store: LimitStore): Host {
  const common = { store, timeoutMs: limits.timeoutMs, failMode: 'insurance' } as const;
  return {
    // Without the refusal cache: every check of the run reaches a store.
    rate: createRateLimitGuard({ ...common, ...limits.rate, refusalCache: 0 }),
    budget: createTurnBudgetGuard({
      ...common,
      maxExecutionsPerTurn: limits.maxExecutionsPerTurn,
    }),
    conc: createConcurrencyGuard({
      ...common,
      maxPerUser: limits.maxPerUser,
      leaseTtlMs: 3_000,
      renewEveryMs: 100,
    }),
    // A limit nobody reaches: tells whether the shared store answers this host.
    probe: createRateLimitGuard({ ...common, name: 'probe', limit: 1_000_000, windowMs: 60_000 }),
  };
}

type Kind = 'rate' | 'budget' | 'lease';
/** Admissions per host (index) per entity (index), split by the store that granted them. */
type Counts = { shared: number; insured: number }[][];

/** What one run admitted, and its length. */
export interface RunTally {
  elapsedMs: number;
  admitted: Record<Kind, Counts>;
  /** The most leases one host held at once for one user, per host per entity. */
  maxInFlight: number[][];
  /** The most leases all hosts held at once for one user, per entity. */
  maxInFlightTotal: number[];
  /** Refusals by a host's own ledger (it held the limit, the shared store did not know). */
  refusedByLedger: Record<Kind, number>;
}

const grid = (hosts: number, entities: number) =>
  Array.from({ length: hosts }, () =>
    Array.from({ length: entities }, () => ({ shared: 0, insured: 0 })),
  );

/**
 * Runs rounds of checks from every host for every entity until `disrupt` has finished and every
 * host's probe has had five answers in a row from the shared store since (at most 30 s), then
 * waits for the leases to be released. One round every 40 ms: each host checks each entity's rate
 * limit, claims an execution of its turn, and asks for a lease it holds `holdMs`.
 */
export async function runScenario(
  stores: LimitStore[],
  entities: Entity[],
  disrupt: () => Promise<void>,
): Promise<RunTally> {
  const hosts = stores.map(hostOn);
  const tally: RunTally = {
    elapsedMs: 0,
    admitted: {
      rate: grid(hosts.length, entities.length),
      budget: grid(hosts.length, entities.length),
      lease: grid(hosts.length, entities.length),
    },
    maxInFlight: hosts.map(() => entities.map(() => 0)),
    maxInFlightTotal: entities.map(() => 0),
    refusedByLedger: { rate: 0, budget: 0, lease: 0 },
  };
  const inFlight = hosts.map(() => entities.map(() => 0));
  const releases: Promise<void>[] = [];
  const probes = hosts.map(() => [] as boolean[]);

  const refused = (kind: Kind) => (error: unknown) => {
    if (!isSandboxError(error)) throw error;
    expect(['RATE_LIMITED', 'BUDGET_EXHAUSTED']).toContain(error.code);
    if (error.details?.thisHost === true) tally.refusedByLedger[kind]++;
  };
  const count = (kind: Kind, host: number, entity: number, insured: boolean) => {
    const cell = tally.admitted[kind][host]![entity]!;
    if (insured) cell.insured++;
    else cell.shared++;
  };

  const round = () =>
    Promise.all(
      hosts.flatMap((host, h) => [
        host.probe
          .acquire({ executionId: randomUUID(), userId: entities[0]!.userId })
          .then((lease) => probes[h]!.push(lease.decision?.insured !== true)),
        ...entities.flatMap((entity, e) => [
          host.rate
            .acquire({ executionId: randomUUID(), userId: entity.userId })
            .then(
              (lease) => count('rate', h, e, lease.decision?.insured === true),
              refused('rate'),
            ),
          host.budget
            .acquire({ executionId: randomUUID(), ...entity })
            .then(
              (lease) => count('budget', h, e, lease.decision?.insured === true),
              refused('budget'),
            ),
          host.conc.acquire({ executionId: randomUUID(), userId: entity.userId }).then((lease) => {
            count('lease', h, e, lease.insured);
            inFlight[h]![e]!++;
            const total = inFlight.reduce((sum, row) => sum + row[e]!, 0);
            tally.maxInFlight[h]![e] = Math.max(tally.maxInFlight[h]![e]!, inFlight[h]![e]!);
            tally.maxInFlightTotal[e] = Math.max(tally.maxInFlightTotal[e]!, total);
            releases.push(
              sleep(limits.holdMs).then(() => {
                // The execution ends here; its lease is given back after.
                inFlight[h]![e]!--;
                return lease.release();
              }),
            );
          }, refused('lease')),
        ]),
      ]),
    );

  const started = performance.now();
  // How many answers each probe had when the disruption ended: only later ones count.
  let answeredBefore: number[] | undefined;
  const disruption = disrupt().then(() => {
    answeredBefore = probes.map((answers) => answers.length);
  });
  const recovered = () =>
    answeredBefore !== undefined &&
    probes.every(
      (answers, h) => answers.length - answeredBefore![h]! >= 5 && answers.slice(-5).every(Boolean),
    );
  while (!recovered()) {
    if (performance.now() - started > 30_000) {
      throw new Error(`not recovered: ${probes.map((answers) => answers.slice(-5)).join(' / ')}`);
    }
    await Promise.all([round(), sleep(40)]);
  }
  await disruption;
  // A few rounds on the recovered store.
  for (let i = 0; i < 5; i++) await Promise.all([round(), sleep(40)]);
  tally.elapsedMs = performance.now() - started;
  await Promise.all(releases);
  return tally;
}

/**
 * The bounds of docs/limits.md, from its formulas: with N hosts, each host is admitted at most
 * the limit whichever store answers, so all of them at most N times it.
 *
 * - rate: per host `burst + ⌈(T + s) × limit / windowMs⌉` (the ledger's slack `s`, the longest
 *   a call still takes its answer, at most `1.1 × timeoutMs + 10 ms`), for a run of length T;
 * - budget: per host `maxExecutionsPerTurn` per turn;
 * - leases: per host `maxPerUser` in flight at once.
 */
export function expectWithinBounds(tally: RunTally, hostCount: number): void {
  const { rate } = limits;
  const ratePerHost =
    rate.burst +
    Math.ceil(((tally.elapsedMs + 1.1 * limits.timeoutMs + 10) * rate.limit) / rate.windowMs);
  const perHost: Record<Kind, number> = {
    rate: ratePerHost,
    budget: limits.maxExecutionsPerTurn,
    lease: Number.POSITIVE_INFINITY, // leases are bounded in flight, below, not in number
  };
  const floor: Record<Kind, number> = {
    rate: rate.limit,
    budget: limits.maxExecutionsPerTurn,
    lease: limits.maxPerUser,
  };
  for (const kind of ['rate', 'budget', 'lease'] as const) {
    const counts = tally.admitted[kind];
    for (let e = 0; e < counts[0]!.length; e++) {
      let total = 0;
      for (let h = 0; h < counts.length; h++) {
        const { shared, insured } = counts[h]![e]!;
        expect(shared + insured, `${kind}, host ${h}, entity ${e}`).toBeLessThanOrEqual(
          perHost[kind],
        );
        total += shared + insured;
      }
      expect(total, `${kind}, entity ${e}, all hosts`).toBeLessThanOrEqual(
        hostCount * perHost[kind],
      );
      // The shared store did its part: at least the limit was admitted.
      expect(total, `${kind}, entity ${e}, all hosts`).toBeGreaterThanOrEqual(floor[kind]);
    }
  }
  for (let e = 0; e < tally.maxInFlightTotal.length; e++) {
    for (let h = 0; h < hostCount; h++) {
      expect(
        tally.maxInFlight[h]![e],
        `leases in flight, host ${h}, entity ${e}`,
      ).toBeLessThanOrEqual(limits.maxPerUser);
    }
    expect(tally.maxInFlightTotal[e], `leases in flight, entity ${e}`).toBeLessThanOrEqual(
      hostCount * limits.maxPerUser,
    );
  }
}

/** Admissions of one kind that the insurance store granted, over every host and entity. */
export function insuredAdmissions(tally: RunTally, kind: Kind): number {
  return tally.admitted[kind].flat().reduce((sum, cell) => sum + cell.insured, 0);
}

/** One line of figures per run, for docs/limits.md (printed only with LIMITS_FIGURES=1). */
export function reportFigures(label: string, tally: RunTally): void {
  if (process.env.LIMITS_FIGURES !== '1') return;
  const perKind = (kind: Kind) => {
    const hosts = tally.admitted[kind].map((row) =>
      Math.max(...row.map((cell) => cell.shared + cell.insured)),
    );
    const totals = tally.admitted[kind][0]!.map((_, e) =>
      tally.admitted[kind].reduce((sum, row) => sum + row[e]!.shared + row[e]!.insured, 0),
    );
    return `${kind}: max/host ${Math.max(...hosts)}, max total ${Math.max(...totals)}, insured ${insuredAdmissions(tally, kind)}, ledger refusals ${tally.refusedByLedger[kind]}`;
  };
  const leases = `leases in flight: max/host ${Math.max(...tally.maxInFlight.flat())}, max total ${Math.max(...tally.maxInFlightTotal)}`;
  process.stdout.write(
    `[figures] ${label}: ${Math.round(tally.elapsedMs)} ms; ${perKind('rate')}; ${perKind('budget')}; ${perKind('lease')}; ${leases}\n`,
  );
}
