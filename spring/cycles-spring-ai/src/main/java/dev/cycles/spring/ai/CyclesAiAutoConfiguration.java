package dev.cycles.spring.ai;

import dev.cycles.CyclesClient;
import org.springframework.ai.chat.client.ChatClient;
import org.springframework.ai.chat.client.ChatClientCustomizer;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnProperty;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.boot.context.properties.source.InvalidConfigurationPropertyValueException;
import org.springframework.context.annotation.Bean;

/**
 * The {@link CyclesChatAdvisor} bean from {@code cycles.ai.*}, with Spring AI's
 * {@code ChatClient} on the class path and a {@link CyclesClient} bean (the starter's, from
 * {@code cycles.*}, or the application's own); and a {@code ChatClientCustomizer} adding it to
 * every {@code ChatClient} built from Spring AI's auto-configured {@code ChatClient.Builder}
 * ({@code cycles.ai.advise-chat-clients=false} to add it by hand). An application's own
 * advisor bean wins.
 */
@AutoConfiguration(afterName = "dev.cycles.spring.CyclesAutoConfiguration")
@ConditionalOnClass({ChatClient.class, CyclesClient.class})
@ConditionalOnBean(CyclesClient.class)
@ConditionalOnProperty(prefix = "cycles.ai", name = "enabled", havingValue = "true", matchIfMissing = true)
@EnableConfigurationProperties(CyclesAiProperties.class)
public class CyclesAiAutoConfiguration {
    @Bean
    @ConditionalOnMissingBean
    public CyclesChatAdvisor cyclesChatAdvisor(CyclesClient client, CyclesAiProperties p) {
        CyclesChatAdvisor.Builder b = CyclesChatAdvisor.builder(client).order(p.getOrder());
        if (p.getPricing() != null) {
            b.pricing(p.getPricing());
        }
        if (p.getActionKind() != null) {
            if (p.getActionKind().isBlank()) {
                throw new InvalidConfigurationPropertyValueException("cycles.ai.action-kind", p.getActionKind(), "must not be blank");
            }
            b.actionKind(p.getActionKind());
        }
        if (p.getDefaultOutputBound() != null) {
            if (p.getDefaultOutputBound() < 1) {
                throw new InvalidConfigurationPropertyValueException("cycles.ai.default-output-bound",
                        p.getDefaultOutputBound(), "must be at least 1");
            }
            b.defaultOutputBound(p.getDefaultOutputBound());
        }
        try {
            return b.build();
        } catch (IllegalArgumentException e) {
            throw new InvalidConfigurationPropertyValueException("cycles.ai.pricing", p.getPricing(), e.getMessage());
        }
    }

    @Bean
    @ConditionalOnMissingBean(name = "cyclesChatClientCustomizer")
    @ConditionalOnProperty(prefix = "cycles.ai", name = "advise-chat-clients", havingValue = "true", matchIfMissing = true)
    public ChatClientCustomizer cyclesChatClientCustomizer(CyclesChatAdvisor advisor) {
        return builder -> builder.defaultAdvisors(advisor);
    }
}
