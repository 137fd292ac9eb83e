import { describe } from 'vitest';
import { ioredisClusterBackend } from './backends.ts';
import { limitSuite } from './limit-suite.ts';

describe('redis-cluster backend', () => limitSuite(async () => ioredisClusterBackend()));
