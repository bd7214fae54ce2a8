package dev.cycles.spring.ai;

import dev.cycles.Action;
import dev.cycles.CyclesClient;
import dev.cycles.GuardSpec;
import dev.cycles.Pricing;
import dev.cycles.Reservation;
import dev.cycles.internal.Json;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
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
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * A {@code ChatClient} advisor (call and stream): reserve what the core's
 * {@code estimate_request} prices the prompt and its output bound at (the options' max tokens,
 * else the builder's default bound), lower the max tokens to the caps' under
 * {@code ALLOW_WITH_CAPS}, call the model, commit what the core's {@code actual} prices the
 * response's usage at (streaming: the last usage seen; a broken stream commits what was seen,
 * none: released), release when the call fails. A denial throws the SDK's typed exception
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
        this.pricing = Json.parse(b.pricingJson);
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

        /** @return the advisor */
        public CyclesChatAdvisor build() {
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
        if (options.getMaxTokens() != null) {
            request.put("max_tokens", options.getMaxTokens());
        }
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

    /**
     * The request with max tokens lowered to the caps' (ALLOW_WITH_CAPS), else unchanged: the
     * core's caps rule ({@code lower_bound}) decides.
     */
    @SuppressWarnings("unchecked")
    private static ChatClientRequest capped(ChatClientRequest req, Reservation r) {
        Long cap = r.caps().map(c -> c.maxTokens()).orElse(null);
        ChatOptions options = req.prompt().getOptions();
        if (cap == null || options == null) {
            return req;
        }
        Map<String, Object> caps = new LinkedHashMap<>();
        caps.put("max_tokens", cap);
        Map<String, Object> args = new LinkedHashMap<>();
        args.put("bound", options.getMaxTokens());
        args.put("caps", caps);
        Map<String, Object> out = (Map<String, Object>) Json.parse(Pricing.call("lower_bound", Json.write(args)));
        if (!Boolean.TRUE.equals(out.get("changed"))) {
            return req;
        }
        int bound = ((Number) out.get("bound")).intValue();
        ChatOptions copy = options.copy();
        try {
            Method set = copy.getClass().getMethod("setMaxTokens", Integer.class);
            set.invoke(copy, bound);
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException("CyclesChatAdvisor: caps limit max tokens to " + bound + " but "
                    + copy.getClass().getName() + " has no setMaxTokens(Integer)", e);
        }
        Prompt prompt = req.prompt().mutate().chatOptions(copy).build();
        return req.mutate().prompt(prompt).build();
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
            resp = chain.nextCall(capped(req, r));
            Long actual = actual(p.model(), usage(resp));
            if (actual != null) {
                r.setActual(actual);
            }
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
                return chain.nextStream(capped(req, r))
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
