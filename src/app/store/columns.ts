/**
 * Column types the feature tables share. pg returns timestamptz as Date and int8 as a string
 * (it may exceed 2^53; our values never do, the stores convert).
 */
import type { ColumnType } from 'kysely';

export type Timestamp = ColumnType<Date, Date | string | undefined, Date | string>;
export type NullableTimestamp = ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;
export type Int8 = ColumnType<string, number | string, number | string>;
export type NullableInt8 = ColumnType<string | null, number | string | null | undefined, number | string | null>;
