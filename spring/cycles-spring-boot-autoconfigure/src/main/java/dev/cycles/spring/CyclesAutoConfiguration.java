package dev.cycles.spring;

import dev.cycles.CyclesClient;
import java.time.Duration;
import org.apache.commons.logging.LogFactory;
import org.springframework.boot.context.properties.bind.Binder;
import org.springframework.core.env.Environment;
import org.springframework.aop.Advisor;
import org.springframework.aop.support.DefaultPointcutAdvisor;
import org.springframework.aop.support.annotation.AnnotationMatchingPointcut;
import org.springframework.beans.factory.BeanFactory;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.beans.factory.config.BeanDefinition;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.context.annotation.Role;

/**
 * The Cycles auto-configuration: a {@link CyclesClient} from {@code cycles.*} (unless the
 * application defines its own), closed with a graceful drain in Spring's shutdown
 * ({@link CyclesShutdown}), and {@link Cycles @Cycles} on bean methods (an infrastructure
 * advisor, checked at bean creation by a post-processor).
 */
@AutoConfiguration
@ConditionalOnClass(CyclesClient.class)
@EnableConfigurationProperties(CyclesProperties.class)
@Import(CyclesProxyRegistrar.class)
public class CyclesAutoConfiguration {
    /** The default drain bound of the shutdown, as the client's own close. */
    static final Duration DEFAULT_CLOSE_TIMEOUT = Duration.ofSeconds(5);

    @Bean
    @ConditionalOnMissingBean
    public CyclesClient cyclesClient(CyclesProperties properties) {
        return CyclesClientFactory.build(properties);
    }

    @Bean
    @ConditionalOnBean(CyclesClient.class)
    public CyclesShutdown cyclesShutdown(CyclesClient client, CyclesProperties properties, Environment env) {
        Duration t = properties.getCloseTimeout() != null ? properties.getCloseTimeout()
                : properties.getRetry().getFlushTimeout() != null ? properties.getRetry().getFlushTimeout()
                : DEFAULT_CLOSE_TIMEOUT;
        // The drain runs within Spring's shutdown phase: never longer than the phase may take.
        Duration phase = Binder.get(env).bind("spring.lifecycle.timeout-per-shutdown-phase", Duration.class)
                .orElse(Duration.ofSeconds(30));
        if (t.compareTo(phase) > 0) {
            LogFactory.getLog(CyclesShutdown.class).warn("the Cycles shutdown drain (" + t + ") is bounded by "
                    + "spring.lifecycle.timeout-per-shutdown-phase (" + phase + ")");
            t = phase;
        }
        return new CyclesShutdown(client, t);
    }

    @Bean
    @Role(BeanDefinition.ROLE_INFRASTRUCTURE)
    static CyclesMethodInterceptor cyclesMethodInterceptor(ObjectProvider<CyclesClient> client,
            ObjectProvider<CyclesProperties> properties, BeanFactory beans, ObjectProvider<CyclesObserver> observers) {
        return new CyclesMethodInterceptor(client, properties, beans, observers);
    }

    @Bean
    @Role(BeanDefinition.ROLE_INFRASTRUCTURE)
    static Advisor cyclesAdvisor(CyclesMethodInterceptor interceptor) {
        DefaultPointcutAdvisor a = new DefaultPointcutAdvisor(new AnnotationMatchingPointcut(null, Cycles.class, true),
                interceptor);
        a.setOrder(org.springframework.core.Ordered.LOWEST_PRECEDENCE - 100);
        return a;
    }

    @Bean
    @Role(BeanDefinition.ROLE_INFRASTRUCTURE)
    static CyclesMethodValidator cyclesMethodValidator(ObjectProvider<CyclesMethodInterceptor> interceptor) {
        return new CyclesMethodValidator(interceptor);
    }
}
