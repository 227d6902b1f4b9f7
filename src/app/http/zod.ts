/**
 * zod with `.openapi()` (component names, examples). Schemas that appear in the OpenAPI
 * document import `z` from here, so the extension is installed before any of them is built.
 */
import { extendZodWithOpenApi } from '@asteasolutions/zod-to-openapi';
import { z } from 'zod';

extendZodWithOpenApi(z);

export { z };
