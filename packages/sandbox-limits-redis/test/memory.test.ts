import { describe } from 'vitest';
import { memoryBackend } from './backends.ts';
import { limitSuite } from './limit-suite.ts';

describe('memory backend', () => limitSuite(async () => memoryBackend()));
