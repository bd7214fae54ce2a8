package dev.cycles.spring.ai;

import dev.cycles.Action;
import dev.cycles.CapsPlan;
import dev.cycles.CyclesClient;
import dev.cycles.GuardSpec;
import dev.cycles.Pricing;
import dev.cycles.Reservation;
import dev.cycles.internal.Json;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.AtomicReference;
import org.springframework.ai.chat.client.ChatClientRequest;
import org.springframework.ai.chat.client.ChatClientResponse;
import org.springframework.ai.chat.client.advisor.api.CallAdvisor;
import org.springframework.ai.chat.client.advisor.api.CallAdvisorChain;
import org.springframework.ai.chat.client.advisor.api.StreamAdvisor;
import org.springframework.ai.chat.client.advisor.api.StreamAdvisorChain;
import org.springframework.ai.chat.messages.Message;
import org.springframework.ai.chat.metadata.Usage;
import org.springframework.ai.chat.model.ChatResponse;
import org.springframework.ai.chat.prompt.ChatOptions;
import org.springframework.ai.chat.prompt.Prompt;
import org.springframework.ai.model.tool.ToolCallingChatOptions;
import org.springframework.ai.tool.ToolCallback;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;

/**
 * A {@code ChatClient} advisor (call and stream): reserve what the core's
 * {@code estimate_request} prices the prompt and its output bound at (the options' max tokens,
 * else the builder's default bound), apply the caps under {@code ALLOW_WITH_CAPS} through the
 * core's {@code plan_caps} ({@link Reservation#planCaps}: max tokens lowered, denied tools
 * removed, the {@code caps_applied} event; a cap of 0 releases and throws
 * {@link CallNotSentException} before the model is called), call the model, commit what the
 * core's {@code actual} prices the response's usage at (streaming: the last usage seen; a
 * broken stream commits what was seen, none: released), release when the call fails. A denial throws the SDK's typed exception
 * (e.g. {@code BudgetExceededException}) before the model is called. Every amount comes from
 * {@link Pricing} (docs/integrations.md): the same charge as every other language's integration.
 */
public final class CyclesChatAdvisor implements CallAdvisor, StreamAdvisor {
    private final CyclesClient client;
    private final Object pricing;
    private final String actionKind;
    private final Long defaultOutputBound;
    private final int order;

    private CyclesChatAdvisor(Builder b) {
        this.client = b.client;
        this.pricing = b.pricing;
        this.actionKind = b.actionKind;
        this.defaultOutputBound = b.defaultOutputBound;
        this.order = b.order;
    }

    /** @param client the SDK client @return a builder */
    public static Builder builder(CyclesClient client) {
        return new Builder(client);
    }

    /** The advisor's settings. */
    public static final class Builder {
        private final CyclesClient client;
        private String pricingJson = "{\"unit\":\"TOKENS\"}";
        private String actionKind = "llm.completion";
        private Long defaultOutputBound;
        private int order = 0;

        private Builder(CyclesClient client) {
            this.client = client;
        }

        /** @param json the core's pricing: {@code {"unit":"TOKENS"}} (default) or a price table @return this */
        public Builder pricing(String json) {
            this.pricingJson = json;
            return this;
        }

        /** @param kind the action kind (default {@code llm.completion}); the name is the model @return this */
        public Builder actionKind(String kind) {
            this.actionKind = kind;
            return this;
        }

        /** @param tokens the output bound of a request without max tokens @return this */
        public Builder defaultOutputBound(long tokens) {
            this.defaultOutputBound = tokens;
            return this;
        }

        /** @param order the advisor's order (default 0) @return this */
        public Builder order(int order) {
            this.order = order;
            return this;
        }

        private Object pricing;

        /**
         * @return the advisor
         * @throws IllegalArgumentException when the pricing is not a JSON object
         */
        public CyclesChatAdvisor build() {
            try {
                pricing = Json.object(pricingJson == null ? "" : pricingJson);
            } catch (IllegalArgumentException e) {
                throw new IllegalArgumentException("the pricing must be a JSON object ({\"unit\":\"TOKENS\"} or a price table): "
                        + e.getMessage(), e);
            }
            return new CyclesChatAdvisor(this);
        }
    }

    @Override
    public String getName() {
        return "CyclesChatAdvisor";
    }

    @Override
    public int getOrder() {
        return order;
    }

    /** What one call reserves: the model, the estimate and its unit. */
    private record Plan(String model, long estimate, String unit) {}

    @SuppressWarnings("unchecked")
    private Plan plan(Prompt prompt) {
        ChatOptions options = prompt.getOptions();
        String model = options == null ? null : options.getModel();
        if (model == null) {
            throw new IllegalArgumentException("CyclesChatAdvisor: the prompt's options name no model (set ChatClient's default options)");
        }
        List<Object> messages = new ArrayList<>();
        for (Message m : prompt.getInstructions()) {
            Map<String, Object> one = new LinkedHashMap<>();
            one.put("role", m.getMessageType().getValue());
            one.put("content", m.getText() == null ? "" : m.getText());
            messages.add(one);
        }
        Map<String, Object> request = new LinkedHashMap<>();
        request.put("model", model);
        request.put("messages", messages);
        bounds(options, request);
        Map<String, Object> args = new LinkedHashMap<>();
        args.put("pricing", pricing);
        args.put("model", model);
        args.put("request", request);
        if (defaultOutputBound != null) {
            args.put("default_output_bound", defaultOutputBound);
        }
        Map<String, Object> out = (Map<String, Object>) Json.parse(Pricing.call("estimate_request", Json.write(args)));
        Map<String, Object> amount = (Map<String, Object>) out.get("amount");
        return new Plan(model, ((Number) amount.get("amount")).longValue(), (String) amount.get("unit"));
    }

    private GuardSpec spec(Plan p) {
        return GuardSpec.of(Action.of(actionKind, p.model()), p.estimate()).unit(p.unit());
    }

    /** The options' accessors by name (reflection: the advisor depends on no model module). */
    private static Object read(Object target, String getter) {
        try {
            return accessible(target.getClass().getMethod(getter)).invoke(target);
        } catch (NoSuchMethodException e) {
            return null;
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException("CyclesChatAdvisor: " + target.getClass().getName() + "." + getter + "() failed", e);
        }
    }

    /**
     * A public method of a class that may not be public itself (a model module's builder
     * inherits its methods from a package-private base): callable once made accessible.
     */
    private static Method accessible(Method m) {
        if (!java.lang.reflect.Modifier.isPublic(m.getDeclaringClass().getModifiers())) {
            m.setAccessible(true);
        }
        return m;
    }

    private static boolean has(Object target, String getter) {
        try {
            target.getClass().getMethod(getter);
            return true;
        } catch (NoSuchMethodException e) {
            return false;
        }
    }

    private static void write(Object target, String setter, Class<?> type, Object value) {
        try {
            accessible(target.getClass().getMethod(setter, type)).invoke(target, value);
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException("CyclesChatAdvisor: caps ask " + setter + "(" + value + ") of "
                    + target.getClass().getName() + ", which has no " + setter + "(" + type.getSimpleName() + ")", e);
        }
    }

    /**
     * The API whose wire format the request is expressed in: Chat Completions when the options
     * are OpenAI's (they have {@code max_completion_tokens}), else Messages (one bound field,
     * {@code max_tokens}, and a smallest bound of 1: right for any provider whose format the
     * core does not know).
     */
    private static CapsPlan.Api api(ChatOptions options) {
        return has(options, "getMaxCompletionTokens") ? CapsPlan.Api.CHAT_COMPLETIONS : CapsPlan.Api.MESSAGES;
    }

    /** The options' output bound fields, as the provider spells them. */
    private static void bounds(ChatOptions options, Map<String, Object> request) {
        if (options.getMaxTokens() != null) {
            request.put("max_tokens", options.getMaxTokens());
        }
        Object mct = read(options, "getMaxCompletionTokens");
        if (mct != null) {
            request.put("max_completion_tokens", mct);
        }
    }

    /** The tools the request offers, by name: its tool callbacks and its tool names. */
    private static List<String> toolNames(ChatOptions options) {
        List<String> names = new ArrayList<>();
        if (options instanceof ToolCallingChatOptions t) {
            if (t.getToolCallbacks() != null) {
                for (ToolCallback c : t.getToolCallbacks()) {
                    names.add(c.getToolDefinition().name());
                }
            }
            // Spring AI 1.x also names tools to resolve (2.x has callbacks only).
            if (read(t, "getToolNames") instanceof Set<?> toolNames) {
                for (Object o : toolNames) {
                    String n = (String) o;
                    if (!names.contains(n)) {
                        names.add(n);
                    }
                }
            }
        }
        return names;
    }

    /**
     * The options' tool choice in the wire's terms, when it names a tool or is a plain mode:
     * a map or JSON text as is, a string mode as is, a typed choice with a {@code name()}
     * (Anthropic's) as {@code {"name"}}; null when none.
     */
    private static Object toolChoice(ChatOptions options) {
        Object c = read(options, "getToolChoice");
        if (c == null || c instanceof Map<?, ?>) {
            return c;
        }
        if (c instanceof String str) {
            return str.trim().startsWith("{") ? Json.parse(str) : str;
        }
        Object name = read(c, "name");
        return name instanceof String n ? Map.of("name", n) : Map.of("type", c.toString());
    }

    /**
     * The request as the core's caps rule sees it (the options' output bound fields, tools by
     * name, the tool choice), planned under the reservation's caps ({@code plan_caps}, which
     * reports a rewrite as the {@code caps_applied} event) and mapped back: bound fields
     * lowered, the tools it removes taken out of the callbacks and names, a tool choice naming
     * one cleared. Unchanged under {@code ALLOW}. A plan that says not to send (a cap of 0)
     * is null: the caller releases and refuses the call.
     */
    private static ChatClientRequest capped(ChatClientRequest req, Reservation r, CapsPlan[] planOut) {
        ChatOptions options = req.prompt().getOptions();
        if (r.caps().isEmpty() || options == null) {
            return req;
        }
        CapsPlan.Api api = api(options);
        Map<String, Object> request = new LinkedHashMap<>();
        bounds(options, request);
        List<String> tools = toolNames(options);
        if (!tools.isEmpty()) {
            List<Object> wire = new ArrayList<>();
            for (String n : tools) {
                wire.add(Map.of("name", n));
            }
            request.put("tools", wire);
            Object choice = toolChoice(options);
            if (choice != null) {
                request.put("tool_choice", choice);
            }
        }
        CapsPlan plan = r.planCaps(api, request);
        planOut[0] = plan;
        if (!plan.send()) {
            return null;
        }
        if (!plan.changed()) {
            return req;
        }
        ChatOptions copy = has(options, "copy") ? copyWith(options, plan) : mutateWith(options, plan);
        Prompt prompt = req.prompt().mutate().chatOptions(copy).build();
        return req.mutate().prompt(prompt).build();
    }

    /** The tool callbacks the plan keeps, in their order. */
    private static List<ToolCallback> kept(ChatOptions options, CapsPlan plan) {
        List<ToolCallback> kept = new ArrayList<>();
        if (options instanceof ToolCallingChatOptions t && t.getToolCallbacks() != null) {
            for (ToolCallback c : t.getToolCallbacks()) {
                if (!plan.removedTools().contains(c.getToolDefinition().name())) {
                    kept.add(c);
                }
            }
        }
        return kept;
    }

    private static Integer bound(CapsPlan plan, String field) {
        Object v = plan.set().get(field);
        return v == null ? null : Math.toIntExact(((Number) v).longValue());
    }

    /** Spring AI 1.x: mutable options, a {@code copy()} changed by its setters. */
    @SuppressWarnings("unchecked")
    private static ChatOptions copyWith(ChatOptions options, CapsPlan plan) {
        ChatOptions copy = (ChatOptions) read(options, "copy");
        if (bound(plan, "max_tokens") != null) {
            write(copy, "setMaxTokens", Integer.class, bound(plan, "max_tokens"));
        }
        if (bound(plan, "max_completion_tokens") != null) {
            write(copy, "setMaxCompletionTokens", Integer.class, bound(plan, "max_completion_tokens"));
        }
        if (!plan.removedTools().isEmpty() && copy instanceof ToolCallingChatOptions t) {
            t.setToolCallbacks(kept(copy, plan));
            Object names = read(copy, "getToolNames");
            if (names != null) {
                Set<String> left = new LinkedHashSet<>((Set<String>) names);
                left.removeAll(plan.removedTools());
                write(copy, "setToolNames", Set.class, left);
            }
        }
        if (plan.unset().contains("tool_choice") && has(copy, "getToolChoice")) {
            write(copy, "setToolChoice", setterType(copy, "setToolChoice"), null);
        }
        if (plan.unset().contains("parallel_tool_calls") && has(copy, "getParallelToolCalls")) {
            write(copy, "setParallelToolCalls", Boolean.class, null);
        }
        return copy;
    }

    /**
     * Spring AI 2.x: immutable options, rebuilt by the builder of {@code mutate()} (no
     * {@code copy()}, no setters, tools as callbacks only).
     */
    private static ChatOptions mutateWith(ChatOptions options, CapsPlan plan) {
        Object b = read(options, "mutate");
        if (b == null) {
            throw new IllegalStateException("CyclesChatAdvisor: caps must change the request, but " + options.getClass().getName()
                    + " has neither copy() nor mutate()");
        }
        if (bound(plan, "max_tokens") != null) {
            write(b, "maxTokens", Integer.class, bound(plan, "max_tokens"));
        }
        if (bound(plan, "max_completion_tokens") != null) {
            write(b, "maxCompletionTokens", Integer.class, bound(plan, "max_completion_tokens"));
        }
        if (!plan.removedTools().isEmpty() && options instanceof ToolCallingChatOptions) {
            write(b, "toolCallbacks", List.class, kept(options, plan));
        }
        if (plan.unset().contains("tool_choice") && has(options, "getToolChoice")) {
            write(b, "toolChoice", setterType(b, "toolChoice"), null);
        }
        if (plan.unset().contains("parallel_tool_calls") && has(options, "getParallelToolCalls")) {
            write(b, "parallelToolCalls", Boolean.class, null);
        }
        return (ChatOptions) read(b, "build");
    }

    /** The parameter type of the one-argument setter {@code name}. */
    private static Class<?> setterType(Object target, String name) {
        for (Method m : target.getClass().getMethods()) {
            if (m.getName().equals(name) && m.getParameterCount() == 1) {
                return m.getParameterTypes()[0];
            }
        }
        throw new IllegalStateException("CyclesChatAdvisor: " + target.getClass().getName() + " has no " + name);
    }

    /**
     * Releases a reservation whose plan says not to send (core's refusal: its reason and
     * message, as every language's integrations), and the exception refusing the call.
     */
    private static CallNotSentException notSent(Reservation r, CapsPlan plan) {
        return new CallNotSentException(r.refuseCall(null), plan);
    }

    /** The core's price of a usage, or null when the response carried none. */
    @SuppressWarnings("unchecked")
    private Long actual(String model, Usage usage) {
        if (usage == null || (nz(usage.getPromptTokens()) == 0 && nz(usage.getCompletionTokens()) == 0)) {
            return null;
        }
        Map<String, Object> u = new LinkedHashMap<>();
        u.put("input_tokens", nz(usage.getPromptTokens()));
        u.put("output_tokens", nz(usage.getCompletionTokens()));
        Map<String, Object> args = new LinkedHashMap<>();
        args.put("pricing", pricing);
        args.put("model", model);
        args.put("usage", u);
        Map<String, Object> out = (Map<String, Object>) Json.parse(Pricing.call("actual", Json.write(args)));
        return ((Number) out.get("amount")).longValue();
    }

    private static long nz(Integer i) {
        return i == null ? 0 : i;
    }

    private static Usage usage(ChatClientResponse resp) {
        ChatResponse cr = resp == null ? null : resp.chatResponse();
        return cr == null || cr.getMetadata() == null ? null : cr.getMetadata().getUsage();
    }

    @Override
    public ChatClientResponse adviseCall(ChatClientRequest req, CallAdvisorChain chain) {
        Plan p = plan(req.prompt());
        Reservation r = client.reserve(spec(p));
        ChatClientResponse resp;
        try {
            CapsPlan[] plan = new CapsPlan[1];
            ChatClientRequest sent = capped(req, r, plan);
            if (sent == null) {
                throw notSent(r, plan[0]);
            }
            resp = chain.nextCall(sent);
            Long actual = actual(p.model(), usage(resp));
            if (actual != null) {
                r.setActual(actual);
            }
        } catch (CallNotSentException e) {
            throw e;
        } catch (RuntimeException e) {
            r.fail();
            r.close();
            throw e;
        }
        r.close();
        return resp;
    }

    @Override
    public Flux<ChatClientResponse> adviseStream(ChatClientRequest req, StreamAdvisorChain chain) {
        return Flux.defer(() -> {
            Plan p = plan(req.prompt());
            return Mono.fromFuture(() -> client.reserveAsync(spec(p))).flatMapMany(r -> {
                AtomicReference<Long> seen = new AtomicReference<>();
                CapsPlan[] plan = new CapsPlan[1];
                ChatClientRequest sent;
                try {
                    sent = capped(req, r, plan);
                } catch (RuntimeException e) {
                    return Mono.fromFuture(r.finishAsync(false)).onErrorResume(x -> Mono.empty()).then(Mono.error(e));
                }
                if (sent == null) {
                    // release() blocks on its request: off the thread that completed the reservation.
                    return Mono.fromCallable(() -> notSent(r, plan[0])).subscribeOn(Schedulers.boundedElastic())
                            .flatMapMany(Flux::error);
                }
                return chain.nextStream(sent)
                        .doOnNext(resp -> {
                            Long a = actual(p.model(), usage(resp));
                            if (a != null) {
                                seen.set(a);
                                r.setActual(a);
                            }
                        })
                        .onErrorResume(e -> Mono.fromFuture(r.finishAsync(false)).onErrorResume(x -> Mono.empty())
                                .then(Mono.error(e)))
                        .concatWith(Mono.defer(() -> Mono.fromFuture(r.finishAsync(true)).then(Mono.<ChatClientResponse>empty())))
                        .doOnCancel(() -> r.finishAsync(false));
            });
        });
    }
}
