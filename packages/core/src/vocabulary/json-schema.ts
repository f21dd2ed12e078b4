/** JSON Schema describing a tool's arguments (or an answer's shape); this file imports nothing of arcflow. */
export type JsonSchema = Record<string, unknown>;
