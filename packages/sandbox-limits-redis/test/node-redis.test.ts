import { describe } from 'vitest';
import { nodeRedisBackend } from './backends.ts';
import { limitSuite } from './limit-suite.ts';

describe('node-redis standalone', () => limitSuite(() => nodeRedisBackend('standalone')));
describe('node-redis cluster', () => limitSuite(() => nodeRedisBackend('cluster')));
