/**
 * The words of a conversation, shared by every floor of arcflow: this file imports nothing of arcflow.
 */

/** A text part of a message's content. */
export interface TextPart {
  readonly type: 'text';
  readonly text: string;
}

/** An image part of a user message's content: an `https:`, `http:` or `data:` URL. */
export interface ImagePart {
  readonly type: 'image_url';
  readonly image_url: { readonly url: string; readonly detail?: 'auto' | 'low' | 'high' };
}

/** One part of a message's content; images only in user messages. */
export type ContentPart = TextPart | ImagePart;

/**
 * One message of a chat conversation, in the OpenAI chat-completions shape: `content` a string or
 * a list of parts, sent to the provider as it is. Checked at enqueue by `checkRunInput`.
 */
export type ChatMessage =
  | { readonly role: 'system' | 'developer'; readonly content: string | readonly TextPart[]; readonly name?: string }
  | { readonly role: 'user'; readonly content: string | readonly ContentPart[]; readonly name?: string }
  | {
      readonly role: 'assistant';
      readonly content: string | readonly TextPart[] | null;
      readonly tool_calls?: readonly RequestedToolCall[];
      readonly name?: string;
      /** As the OpenAI SDK returns an assistant message: null, or the model's refusal. */
      readonly refusal?: string | null;
    }
  | { readonly role: 'tool'; readonly tool_call_id: string; readonly content: string | readonly TextPart[] };

/** A tool call as the model asked for it; `arguments` is the raw JSON text the model produced. */
export interface RequestedToolCall {
  readonly id: string;
  readonly type: 'function';
  readonly function: { readonly name: string; readonly arguments: string };
}
